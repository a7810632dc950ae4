package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document describing every route of
// the server but the HTML support pages, served at GET /v1/openapi.json.
// It is never written to.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIDocument returns a copy of the embedded OpenAPI 3.1 document
// (httpapi/openapi.json). Its test validates real responses of every route
// against it: change both together.
func OpenAPIDocument() []byte { return append([]byte(nil), openAPIDocument...) }

// handleOpenAPI answers GET /v1/openapi.json with the OpenAPI document. It
// holds no secrets, so it needs no token.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
