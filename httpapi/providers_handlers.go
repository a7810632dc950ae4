package httpapi

import (
	"net/http"

	"pacer/providers"
)

// ProviderList is the body of GET /v1/providers: what each provider
// profile recognises, for people choosing a scope's "provider" and for the
// support page. It is built from the profiles' own rules
// (providers.DescribeAll), so it cannot drift from what they do.
type ProviderList struct {
	// Providers describes the built-in profiles by name, then "custom"
	// (the rules a declarative profile starts from).
	Providers []providers.Description `json:"providers"`
	// Standard are the rules every profile falls back to when none of its
	// own signals matches.
	Standard []providers.Signal `json:"standard"`
	// TimeFormats are the names a custom profile may give a time header's
	// "format".
	TimeFormats []string `json:"timeFormats"`
}

// handleListProviders answers GET /v1/providers.
func (s *Server) handleListProviders(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, ProviderList{
		Providers:   providers.DescribeAll(),
		Standard:    providers.StandardSignals(),
		TimeFormats: providers.ResetFormNames(),
	})
}
