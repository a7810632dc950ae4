package providers_test

import (
	"encoding/json"
	"strings"
	"testing"

	"pacer/providers"
)

// Every description is complete enough for a person choosing a provider:
// valid classes, reasons, wait formats, a reference to providers.md.
func TestDescribeAll(t *testing.T) {
	ds := providers.DescribeAll()
	if got, want := len(ds), len(providers.Names())+1; got != want {
		t.Fatalf("descriptions: got %d, want %d", got, want)
	}
	for _, d := range ds {
		t.Run(d.Name, func(t *testing.T) {
			if d.Title == "" || !strings.HasPrefix(d.Reference, "providers.md §") {
				t.Errorf("title %q, reference %q", d.Title, d.Reference)
			}
			if len(d.Signals) == 0 || len(d.RateLimitHints) == 0 || len(d.TransientHints) == 0 || d.Defaults.MaxConcurrent < 1 {
				t.Errorf("incomplete: %+v", d)
			}
			for _, s := range d.Signals {
				for _, c := range []providers.Class{s.Class, s.ReadClass, s.KeyedClass} {
					if c != "" && !c.Valid() {
						t.Errorf("signal %+v: class %q", s, c)
					}
				}
				if s.Class != providers.ClassSuccess && s.Reason == "" {
					t.Errorf("signal %s %s: no reason", s.Status, s.When)
				}
				if s.Shared && s.Class != providers.ClassRateLimited {
					t.Errorf("signal %s %s: shared %s", s.Status, s.When, s.Class)
				}
				for _, h := range s.Hints {
					if h.Source == "" || h.Format == "" {
						t.Errorf("signal %s %s: hint source %+v", s.Status, s.When, h)
					}
				}
			}
			if (len(d.SharedLimits) > 0) != hasShared(d) {
				t.Errorf("shared limits %v disagree with the signals", d.SharedLimits)
			}
			if d.Idempotency.Header != "" && d.Idempotency.Retention == "" {
				t.Errorf("idempotency header without retention: %+v", d.Idempotency)
			}
			if _, err := json.Marshal(d); err != nil {
				t.Errorf("marshal: %v", err)
			}
			again, err := providers.Describe(d.Name)
			if err != nil || again.Name != d.Name {
				t.Errorf("Describe(%q): %v", d.Name, err)
			}
		})
	}
	if _, err := providers.Describe("nope"); err == nil {
		t.Errorf("Describe(nope): no error")
	}
}

func hasShared(d providers.Description) bool {
	for _, s := range d.Signals {
		if s.Shared {
			return true
		}
	}
	return false
}

// The providers whose limits providers.md calls app- or project-wide say
// so; the others pause only their scope.
func TestSharedLimits(t *testing.T) {
	want := map[string]bool{"jira": true, "msgraph": true, "google": true, "x": true}
	for _, d := range providers.DescribeAll() {
		if got := len(d.SharedLimits) > 0; got != want[d.Name] {
			t.Errorf("%s: shared limits %v, want shared=%v", d.Name, d.SharedLimits, want[d.Name])
		}
	}
}

func TestResetFormText(t *testing.T) {
	for _, name := range providers.ResetFormNames() {
		f, ok := providers.ParseResetForm(name)
		if !ok || f.String() != name {
			t.Errorf("%q: got %v, %v", name, f, ok)
		}
		b, err := f.MarshalText()
		if err != nil || string(b) != name {
			t.Errorf("%q: marshal %q, %v", name, b, err)
		}
		var back providers.ResetForm
		if err := back.UnmarshalText(b); err != nil || back != f {
			t.Errorf("%q: unmarshal %v, %v", name, back, err)
		}
	}
	var f providers.ResetForm
	if err := f.UnmarshalText([]byte("millis")); err == nil || !strings.Contains(err.Error(), "delta-millis") {
		t.Errorf("unknown form: %v", err)
	}
	if _, err := providers.ResetForm(99).MarshalText(); err == nil {
		t.Errorf("marshal of an unknown form: no error")
	}
}
