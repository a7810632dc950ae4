package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestMSGraphClassify(t *testing.T) {
	p := providers.NewMSGraph()
	graphErr := func(code string) string {
		return `{"error":{"code":"` + code + `","message":"…","innerError":{"request-id":"r1","date":"2026-09-11T02:00:00"}}}`
	}
	tests := []signalCase{
		{name: "OKNearLimit", ex: exchange{status: 200, header: header("x-ms-throttle-limit-percentage", "0.9", "request-id", "r1")},
			want: want{class: providers.ClassSuccess, detail: "throttle limit percentage 0.9"}},
		// providers.md §7 Scope: x-ms-throttle-scope Application ⇒ pause all customers.
		{name: "429ApplicationScope", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "10", "x-ms-throttle-scope", "Application/Limit/4f7b1a2c-0000-0000-0000-000000000000/contoso.onmicrosoft.com"), body: graphErr("TooManyRequests")},
			want: want{class: providers.ClassRateLimited, reason: "app-throttled", shared: true, hintSrc: "retry-after", hintAt: now.Add(10 * time.Second), detail: "throttle scope Application/"}},
		// providers.md §7 Scope: Tenant_Application and Tenant pause only the scope.
		{name: "429TenantApplicationScope", ex: exchange{status: 429, header: header("Retry-After", "5", "x-ms-throttle-scope", "Tenant_Application/Limit/app/tenant"), body: graphErr("activityLimitReached")},
			want: want{class: providers.ClassRateLimited, reason: "throttled", hintSrc: "retry-after", hintAt: now.Add(5 * time.Second)}},
		// providers.md §7 RL: none → exponential (the policy's default delay).
		{name: "429NoRetryAfter", ex: exchange{method: "PATCH", status: 429, body: graphErr("throttledRequest")},
			want: want{class: providers.ClassRateLimited, reason: "throttled"}},
		{name: "509Bandwidth", ex: exchange{status: 509}, want: want{class: providers.ClassRateLimited, reason: "bandwidth-limit"}},
		// providers.md §7 RL: 503 serviceNotAvailable may carry Retry-After.
		{name: "503RetryAfter", ex: exchange{method: "POST", status: 503, header: header("Retry-After", "7"), body: graphErr("serviceNotAvailable")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "retry-after", hintAt: now.Add(7 * time.Second)}},
		{name: "504Write", ex: exchange{method: "POST", status: 504}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "504Read", ex: exchange{status: 504}, want: want{class: providers.ClassTransient, reason: "server-error"}},
		// providers.md §7 AUTH.
		{name: "401", ex: exchange{status: 401, body: graphErr("InvalidAuthenticationToken")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "InsufficientClaims", ex: exchange{status: 401, header: header("WWW-Authenticate", `Bearer realm="", error="insufficient_claims", claims="eyJ…"`), body: graphErr("InvalidAuthenticationToken")},
			want: want{class: providers.ClassAuthRevoked, reason: "insufficient-claims"}},
		{name: "403InsufficientClaims", ex: exchange{status: 403, body: graphErr("insufficient_claims")},
			want: want{class: providers.ClassAuthRevoked, reason: "insufficient-claims"}},
		{name: "403AccessDenied", ex: exchange{method: "POST", status: 403, body: graphErr("accessDenied")},
			want: want{class: providers.ClassPermanent, reason: "access-denied"}},
		// providers.md §7 PERM.
		{name: "400", ex: exchange{method: "POST", status: 400, body: graphErr("invalidRequest")}, want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		{name: "404", ex: exchange{status: 404, body: graphErr("itemNotFound")}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "409", ex: exchange{method: "POST", status: 409, body: graphErr("nameAlreadyExists")}, want: want{class: providers.ClassPermanent, reason: "conflict"}},
		{name: "412", ex: exchange{method: "PATCH", status: 412}, want: want{class: providers.ClassPermanent, reason: "client-error"}},
		{name: "413", ex: exchange{method: "PUT", status: 413}, want: want{class: providers.ClassPermanent, reason: "too-large"}},
		{name: "422", ex: exchange{method: "POST", status: 422}, want: want{class: providers.ClassPermanent, reason: "validation"}},
		{name: "423", ex: exchange{method: "PUT", status: 423, body: graphErr("resourceLocked")}, want: want{class: providers.ClassTransient, reason: "locked"}},
		{name: "507", ex: exchange{method: "PUT", status: 507, body: graphErr("quotaLimitReached")}, want: want{class: providers.ClassPermanent, reason: "storage-quota"}},
	}
	runSignals(t, p, tests)
}

func TestMSGraphProfile(t *testing.T) {
	p, _ := providers.Lookup("msgraph", providers.Options{})
	// providers.md §7 Idempotency: none general.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
	if got := p.Defaults(); got.MaxConcurrent != 4 {
		t.Errorf("defaults: got %+v", got)
	}
}
