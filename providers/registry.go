package providers

import (
	"fmt"
	"sort"
)

// Lookup returns the profile called name, shaped by opts. The error names
// the known profiles when name is not one of them.
func Lookup(name string, opts Options) (Profile, error) {
	ctor, ok := constructors()[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %v)", name, Names())
	}
	return ctor(opts), nil
}

// Names lists the built-in profiles, sorted.
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
		"generic": func(o Options) Profile { return NewGeneric(o) },
		"github":  func(Options) Profile { return NewGitHub() },
		"stripe":  func(Options) Profile { return NewStripe() },
	}
}
