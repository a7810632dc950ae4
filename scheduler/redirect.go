package scheduler

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"pacer/providers"
)

// maxRedirects bounds the redirects one attempt follows (design §12); the
// next redirect ends the attempt as a failure.
const maxRedirects = 5

// hop is one redirect the sender followed.
type hop struct {
	status int
	method string // the method of the request that got the redirect
	to     string // where it pointed, for diagnostics (see showURL)
}

// redirects is what the sender learned of redirects during one attempt:
// the hops it followed and, when the chain ended on a redirect that decides
// the attempt by itself, the verdict that replaces the profile's class.
type redirects struct {
	hops    []hop
	verdict *redirectVerdict
}

// redirectVerdict is the outcome of an attempt that ended on a redirect
// pacer does not follow.
type redirectVerdict struct {
	class  providers.Class
	reason string
	detail string
}

// redirectStep is what to do with one answer: follow it (next is the
// request to send), or stop (verdict may be nil: the answer is not a
// redirect and the profile classifies it).
type redirectStep struct {
	follow  bool
	next    *url.URL
	method  string
	body    []byte
	verdict *redirectVerdict
}

// redirectRule decides, per design §12, what the answer resp to a request
// (method, body, sent to cur) means for an operation of kind kind, whose
// scope lives at origin, after followed redirects. It is the one place the
// redirect rules are written:
//
//   - A read follows 301, 302, 303, 307 and 308 within the scope's origin.
//     A 303 is fetched with GET (HEAD stays HEAD), as RFC 9110 §15.4.4 says;
//     the others re-send the read as it was (a read is safe to repeat).
//   - A mutation follows 307 and 308 only, with the same method, body and
//     request identity: RFC 9110 §15.4.8/§15.4.9 forbid the client to change
//     the request, and the server says the resource is elsewhere, so nothing
//     was applied at the first URL.
//   - A 303 after a mutation is a success: "see other" is the provider saying
//     the effect happened and where its result is. It is not fetched.
//   - A 301 or 302 after a mutation is not followed and holds the operation
//     as an unknown outcome. RFC 9110 §15.4.2/§15.4.3 let a client turn the
//     POST into a GET, so following would send a different request than the
//     one asked for; and these are not a definite "nothing happened": many
//     servers answer an applied POST with a 302 to its result (the
//     post-redirect-get pattern that predates 303). Failing it could tell a
//     client an applied effect did not happen (design §11), so a person checks
//     (or, where the provider honours idempotency keys, invariant 4 applies).
//   - A redirect to another origin (scheme, host or port differ from the
//     scope's base URL) is never followed, so the scope's credentials never
//     leave its origin; the attempt fails with the Location it named.
//   - A redirect without a usable Location, or one past maxRedirects
//     (a loop ends there too), fails the attempt.
func redirectRule(resp *http.Response, kind Kind, method string, body []byte, cur *url.URL, origin string, followed int) redirectStep {
	st := resp.StatusCode
	switch st {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return redirectStep{}
	}
	raw := resp.Header.Get("Location")
	loc, locErr := cur.Parse(raw)
	shown := ""
	if locErr == nil {
		shown = showURL(loc)
	}
	mutation := kind == KindMutation
	stop := func(c providers.Class, reason, format string, args ...any) redirectStep {
		return redirectStep{verdict: &redirectVerdict{class: c, reason: reason, detail: fmt.Sprintf(format, args...)}}
	}
	switch {
	case mutation && st == http.StatusSeeOther:
		return stop(providers.ClassSuccess, "", "%d See Other after %s: the provider applied it; its result is at %s (not fetched)", st, method, orNone(shown))
	case mutation && (st == http.StatusMovedPermanently || st == http.StatusFound):
		return stop(providers.ClassUnknownOutcome, "redirect-after-mutation",
			"%d after %s, pointing to %s: not followed (a client may turn a %d into a GET, RFC 9110 §15.4) and not proof that nothing was applied (post-redirect-get)",
			st, method, orNone(shown), st)
	case raw == "" || locErr != nil || loc.Host == "" || (loc.Scheme != "http" && loc.Scheme != "https"):
		return stop(providers.ClassPermanent, "redirect-without-location", "%d after %s without a usable Location (%q)", st, method, showRaw(raw))
	case originOf(loc) != origin:
		return stop(providers.ClassPermanent, "redirect-other-origin",
			"%d after %s points to another origin: %s (the scope's origin is %s); pacer does not follow it, so the scope's credentials stay on its origin",
			st, method, shown, origin)
	case followed >= maxRedirects:
		return stop(providers.ClassPermanent, "redirect-limit", "%d after %s to %s: more than %d redirects (a loop?); not followed", st, method, shown, maxRedirects)
	}
	// User information in a Location is not pacer's to send: the request
	// carries the scope's credentials only.
	loc.User = nil
	next := redirectStep{follow: true, next: loc, method: method, body: body}
	if st == http.StatusSeeOther && method != http.MethodHead {
		next.method, next.body = http.MethodGet, nil
	}
	return next
}

// originOf is u's origin, scheme://host:port, with the scheme's default
// port spelled out and the host in lower case.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// showURL renders u for a diagnostic without what may carry a secret: no
// user information, no fragment, and the query's values replaced (signed
// download links carry tokens there); bounded.
func showURL(u *url.URL) string {
	v := *u
	v.User, v.Fragment, v.RawFragment = nil, "", ""
	if v.RawQuery != "" {
		q := v.Query()
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, url.QueryEscape(k)+"=…")
		}
		slices.Sort(keys)
		if len(keys) > 8 {
			keys = append(keys[:8], "…")
		}
		v.RawQuery = ""
		return cutText(v.String()+"?"+strings.Join(keys, "&"), 512)
	}
	return cutText(v.String(), 512)
}

// cutText bounds s to n bytes for a diagnostic.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return providers.Cut(s, n) + "…"
}

// showRaw is a Location that could not be used, for a diagnostic: cut
// before its query or fragment, and not shown at all if it may carry user
// information (an "@"), since those may carry secrets.
func showRaw(raw string) string {
	if strings.Contains(raw, "@") {
		return "…"
	}
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i] + "…"
	}
	return cutText(raw, 128)
}

// orNone is s, or a note that there was no usable Location.
func orNone(s string) string {
	if s == "" {
		return "(no usable Location)"
	}
	return s
}

// discard reads a little of a redirect's body, so the connection can be
// reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// settle applies what the sender learned of redirects to the profile's
// outcome of the final answer: a verdict replaces its class (the profile's
// budget figures stay: the provider sent them), and the diagnostic says
// which redirects were followed. red redacts and bounds the new text.
func (r redirects) settle(out providers.Outcome, red *redactor) providers.Outcome {
	if v := r.verdict; v != nil {
		out.Class, out.Reason, out.Detail = v.class, v.reason, v.detail
		out.Hint, out.Shared, out.Ambiguous, out.KeyBound = providers.Hint{}, false, false, false
	}
	if len(r.hops) > 0 {
		parts := make([]string, len(r.hops))
		for i, h := range r.hops {
			parts[i] = fmt.Sprintf("%d after %s → %s", h.status, h.method, h.to)
		}
		note := fmt.Sprintf("followed %d redirect(s): %s", len(r.hops), strings.Join(parts, "; "))
		if out.Detail != "" {
			note += "; then " + out.Detail
		}
		out.Detail = note
	}
	out.Detail = red.Cut(out.Detail, providers.MaxDetail)
	return out
}
