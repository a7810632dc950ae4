package providers_test

import (
	"testing"

	"pacer/providers"
)

func TestSalesforceClassify(t *testing.T) {
	p := providers.NewSalesforce()
	sfErr := func(code, msg string) string {
		return `[{"message":"` + msg + `","errorCode":"` + code + `","fields":[]}]`
	}
	tests := []signalCase{
		// providers.md §6 RL: Sforce-Limit-Info api-usage=USED/LIMIT.
		{name: "OKLimitInfo", ex: exchange{status: 200, header: header("Sforce-Limit-Info", "api-usage=25/15000")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 14975, Limit: 15000}}},
		{name: "OKPerAppUsage", ex: exchange{status: 200, header: header("Sforce-Limit-Info", "api-usage=25/15000; per-app-api-usage=240/250(appName=sample-connected-app)")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 10, Limit: 250}}},
		// providers.md §6 RL: 403 REQUEST_LIMIT_EXCEEDED is the org's 24-h limit, not a permission error.
		{name: "403RequestLimitExceeded", ex: exchange{method: "POST", status: 403, header: header("Sforce-Limit-Info", "api-usage=15000/15000"), body: sfErr("REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")},
			want: want{class: providers.ClassRateLimited, reason: "api-limit", hintSrc: "salesforce-api-limit-default", hintAt: now.Add(providers.SalesforceAPILimitWait), budget: &providers.Budget{Remaining: 0, Limit: 15000}}},
		// providers.md §6 RL: also the concurrent long-running limit (verify).
		{name: "403ConcurrentLimit", ex: exchange{status: 403, body: sfErr("REQUEST_LIMIT_EXCEEDED", "ConcurrentPerOrgLongTxn Limit exceeded.")},
			want: want{class: providers.ClassRateLimited, reason: "concurrent-limit"}},
		// providers.md §6 AUTH.
		{name: "401InvalidSession", ex: exchange{status: 401, body: sfErr("INVALID_SESSION_ID", "Session expired or invalid")},
			want: want{class: providers.ClassAuthRevoked, reason: "invalid-session-id"}},
		// providers.md §6 PERM.
		{name: "403InsufficientAccess", ex: exchange{method: "PATCH", status: 403, body: sfErr("INSUFFICIENT_ACCESS", "insufficient access rights on object id")},
			want: want{class: providers.ClassPermanent, reason: "insufficient-access"}},
		{name: "300AmbiguousExternalID", ex: exchange{method: "PATCH", status: 300, body: `["/services/data/v60.0/sobjects/Account/001A","/services/data/v60.0/sobjects/Account/001B"]`},
			want: want{class: providers.ClassPermanent, reason: "ambiguous-external-id"}},
		{name: "400MalformedQuery", ex: exchange{status: 400, body: sfErr("MALFORMED_QUERY", "unexpected token: FORM")},
			want: want{class: providers.ClassPermanent, reason: "malformed-query"}},
		{name: "400RequiredFieldMissing", ex: exchange{method: "POST", status: 400, body: sfErr("REQUIRED_FIELD_MISSING", "Required fields are missing: [Name]")},
			want: want{class: providers.ClassPermanent, reason: "required-field-missing"}},
		{name: "400DuplicateValue", ex: exchange{method: "POST", status: 400, body: sfErr("DUPLICATE_VALUE", "duplicate value found")},
			want: want{class: providers.ClassPermanent, reason: "duplicate-value"}},
		{name: "404", ex: exchange{status: 404, body: sfErr("NOT_FOUND", "The requested resource does not exist")}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "405", ex: exchange{method: "DELETE", status: 405}, want: want{class: providers.ClassPermanent, reason: "method-not-allowed"}},
		{name: "409", ex: exchange{method: "PATCH", status: 409}, want: want{class: providers.ClassPermanent, reason: "conflict"}},
		{name: "412", ex: exchange{method: "PATCH", status: 412}, want: want{class: providers.ClassPermanent, reason: "client-error"}},
		{name: "415", ex: exchange{method: "POST", status: 415}, want: want{class: providers.ClassPermanent, reason: "unsupported-media-type"}},
		// providers.md §6 TR / UNK.
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500, body: sfErr("UNKNOWN_EXCEPTION", "An unexpected error occurred")},
			want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "500Read", ex: exchange{status: 500}, want: want{class: providers.ClassTransient, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestSalesforceProfile(t *testing.T) {
	p, _ := providers.Lookup("salesforce", providers.Options{})
	// providers.md §6 Idempotency: none (upsert by external ID).
	if p.Idempotency().Applies("PATCH") {
		t.Errorf("Applies(PATCH) = true")
	}
	if got := p.Defaults(); got.MaxConcurrent != 4 || got.Requests != 0 {
		t.Errorf("defaults: got %+v", got)
	}
}
