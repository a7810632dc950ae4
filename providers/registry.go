package providers

import (
	"errors"
	"fmt"
	"sort"
)

// CustomName is the provider name of a scope described by a declarative
// profile (Spec) instead of a built-in one.
const CustomName = "custom"

// ErrSpecRequired is returned by Lookup for CustomName without a Spec.
var ErrSpecRequired = errors.New(`provider "custom" needs a profile spec`)

// Lookup returns the profile called name, shaped by opts. CustomName builds
// the declarative profile of opts.Spec: without one the error wraps
// ErrSpecRequired, and an invalid one gives its *SpecError. The error names
// the known profiles when name is not one of them.
func Lookup(name string, opts Options) (Profile, error) {
	if name == CustomName {
		if opts.Spec == nil {
			return nil, fmt.Errorf("look up provider: %w", ErrSpecRequired)
		}
		return NewDeclarative(*opts.Spec)
	}
	ctor, ok := constructors()[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %v, or %q with a profile)", name, Names(), CustomName)
	}
	return ctor(opts), nil
}

// Names lists the built-in profiles, sorted. CustomName is not among them.
func Names() []string {
	var names []string
	for name := range constructors() {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// constructors maps each built-in profile name to its constructor. It is a
// function, not a package variable, so the package keeps no state.
func constructors() map[string]func(Options) Profile {
	return map[string]func(Options) Profile{
		"generic":    func(o Options) Profile { return NewGeneric(o) },
		"github":     func(Options) Profile { return NewGitHub() },
		"google":     func(Options) Profile { return NewGoogle() },
		"hubspot":    func(Options) Profile { return NewHubSpot() },
		"intercom":   func(Options) Profile { return NewIntercom() },
		"jira":       func(Options) Profile { return NewJira() },
		"msgraph":    func(Options) Profile { return NewMSGraph() },
		"notion":     func(Options) Profile { return NewNotion() },
		"salesforce": func(Options) Profile { return NewSalesforce() },
		"sendgrid":   func(Options) Profile { return NewSendGrid() },
		"shopify":    func(Options) Profile { return NewShopify() },
		"slack":      func(Options) Profile { return NewSlack() },
		"stripe":     func(Options) Profile { return NewStripe() },
		"twilio":     func(Options) Profile { return NewTwilio() },
		"x":          func(Options) Profile { return NewX() },
		"zendesk":    func(Options) Profile { return NewZendesk() },
	}
}
