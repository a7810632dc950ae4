package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"pacer/httpapi"
	"pacer/providers"
)

func TestListProviders(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	res := b.do(http.MethodGet, "/v1/providers", "")
	list := decodeAs[httpapi.ProviderList](t, res, http.StatusOK)

	var names []string
	for _, d := range list.Providers {
		names = append(names, d.Name)
	}
	if want := append(providers.Names(), providers.CustomName); !slices.Equal(names, want) {
		t.Fatalf("providers: got %v, want %v", names, want)
	}
	// The list is the profiles' own description, not a copy that can drift.
	for _, got := range list.Providers {
		want, err := providers.Describe(got.Name)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(want)
		var wantBack providers.Description
		if err := json.Unmarshal(wantJSON, &wantBack); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, wantBack) {
			t.Errorf("%s: the API description differs from providers.Describe", got.Name)
		}
	}
	if !slices.Contains(list.TimeFormats, "delta-millis") || !slices.Contains(list.TimeFormats, "iso8601") {
		t.Errorf("timeFormats: %v", list.TimeFormats)
	}
	if len(list.Standard) == 0 || list.Standard[0].Class != providers.ClassSuccess {
		t.Errorf("standard rules: %+v", list.Standard)
	}

	// What a person choosing a provider reads: Shopify's shop states pause
	// the shop, Jira's global quota is shared, Stripe's key is kept 24 h.
	byName := map[string]providers.Description{}
	for _, d := range list.Providers {
		byName[d.Name] = d
	}
	if !hasSignal(byName["shopify"], "402", providers.ClassRateLimited) {
		t.Errorf("shopify: 402 is not described as rateLimited: %+v", byName["shopify"].Signals)
	}
	if !hasSignal(byName["slack"], "2xx", providers.ClassAuthRevoked) {
		t.Errorf("slack: 200 ok:false auth codes are not described")
	}
	if len(byName["jira"].SharedLimits) == 0 || len(byName["github"].SharedLimits) != 0 {
		t.Errorf("shared limits: jira %v, github %v", byName["jira"].SharedLimits, byName["github"].SharedLimits)
	}
	if got := byName["stripe"].Idempotency; got.Header != "Idempotency-Key" || got.Retention != "24h" {
		t.Errorf("stripe idempotency: %+v", got)
	}
	if got := byName["github"].Defaults; got.MaxConcurrent != 10 || got.RateLimit == nil || got.RateLimit.Per != "1h" {
		t.Errorf("github defaults: %+v", got)
	}

	b.token = ""
	problemOf(t, b.do(http.MethodGet, "/v1/providers", ""), http.StatusUnauthorized)
}

func hasSignal(d providers.Description, status string, c providers.Class) bool {
	for _, s := range d.Signals {
		if s.Status == status && s.Class == c {
			return true
		}
	}
	return false
}

// customScope is a scope of a provider pacer does not know, described by
// its declarative profile.
const customScope = `{
	"provider": "custom",
	"baseURL": "https://api.example.com:8443",
	"credentials": {"type": "bearer", "token": "` + secretBearer + `"},
	"profile": {
		"statuses": {"420": "rateLimited", "5xx": "unknownOutcome"},
		"retryAfter": {"header": "X-Wait-Ms", "format": "delta-millis"},
		"budget": {"remaining": "X-Quota-Left", "limit": "X-Quota", "reset": {"header": "X-Quota-Reset", "format": "epoch-seconds"}},
		"idempotency": {"header": "X-Request-Key", "retention": "24h", "methods": ["POST"]},
		"maxConcurrent": 6
	}
}`

func TestPutScopeCustomProfile(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		sc := decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/custom-a", customScope), http.StatusCreated)
		if sc.Profile == nil || sc.Profile.RetryAfter == nil || sc.Profile.RetryAfter.Header != "X-Wait-Ms" {
			t.Fatalf("profile not returned: %+v", sc.Profile)
		}
		if got, want := sc.MaxConcurrent, 6; got != want {
			t.Errorf("maxConcurrent from the profile's default: got %d, want %d", got, want)
		}
		if got, want := sc.Group, "custom:api.example.com:8443"; got != want {
			t.Errorf("group: got %q, want %q", got, want)
		}
		got := decodeAs[httpapi.Scope](t, b.do(http.MethodGet, "/v1/scopes/custom-a", ""), http.StatusOK)
		if !reflect.DeepEqual(got.Profile, sc.Profile) {
			t.Errorf("GET profile: got %+v, want %+v", got.Profile, sc.Profile)
		}
		// Replacing it with a built-in provider drops the profile.
		res := b.do(http.MethodPut, "/v1/scopes/custom-a", scopeBody)
		if sc := decodeAs[httpapi.Scope](t, res, http.StatusOK); sc.Profile != nil {
			t.Errorf("profile kept on a github scope: %+v", sc.Profile)
		}
		if _, ok := decodeAs[map[string]any](t, res, http.StatusOK)["profile"]; ok {
			t.Errorf("a built-in scope shows a profile: %s", res.Body)
		}
	})

	t.Run("ErrBadSpec", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		body := `{"provider":"custom","baseURL":"https://api.example.com","profile":{
			"statuses":{"200":"permanent","420":"rateLimted"},
			"retryAfter":{"header":"X-Wait-Ms","format":"millis"},
			"idempotency":{"header":"Authorization","retention":"1d"},
			"bodyCode":{"pointer":"error.code","classes":{"A":"transient"}}}}`
		p := problemOf(t, b.do(http.MethodPut, "/v1/scopes/custom-b", body), http.StatusUnprocessableEntity)
		for _, f := range []string{"profile.statuses.200", "profile.statuses.420", "profile.retryAfter.format", "profile.idempotency.header", "profile.idempotency.retention", "profile.bodyCode.pointer"} {
			if !hasField(p, f, "") {
				t.Errorf("problem does not list %s: %+v", f, p.Errors)
			}
		}
		problemOf(t, b.do(http.MethodGet, "/v1/scopes/custom-b", ""), http.StatusNotFound)
	})

	t.Run("ErrProfileRequired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		p := problemOf(t, b.do(http.MethodPut, "/v1/scopes/custom-c", `{"provider":"custom","baseURL":"https://api.example.com"}`), http.StatusUnprocessableEntity)
		if !hasField(p, "profile", "is required") {
			t.Errorf("problem: %+v", p.Errors)
		}
	})

	t.Run("ErrProfileOnBuiltIn", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		body := `{"provider":"github","baseURL":"https://api.github.com","profile":{"maxConcurrent":2}}`
		p := problemOf(t, b.do(http.MethodPut, "/v1/scopes/gh", body), http.StatusUnprocessableEntity)
		if !hasField(p, "profile", "custom") {
			t.Errorf("problem: %+v", p.Errors)
		}
	})

	t.Run("ErrUnknownSpecField", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		body := `{"provider":"custom","baseURL":"https://api.example.com","profile":{"retry_after":{"header":"X"}}}`
		problemOf(t, b.do(http.MethodPut, "/v1/scopes/custom-d", body), http.StatusBadRequest)
	})
}
