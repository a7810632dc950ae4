package providers

// standardRules are the standards-only reading of a response's status
// (RFC 9110, RFC 6585) that every profile falls back to, in order.
//
// A 5xx other than 503 may have come after the provider acted, so for a
// mutation it is an unknown outcome unless the request carried an
// idempotency key the provider honours (a resend with the same key is then
// safe). 503 and 408 say the request was not processed. A status outside the
// 2xx, 4xx and 5xx ranges that reaches a profile is unexpected (the sender
// follows or settles 301, 302, 303, 307 and 308 itself, design §12, so what
// is left is 300, 304, 305, 306 and the like): a mutation's effect is then
// unknown, a read fails.
func standardRules() []rule {
	std := func(status string, c Class, reason string) rule {
		return rule{Signal: Signal{Status: status, Class: c, Reason: reason}}
	}
	return []rule{
		std("2xx", ClassSuccess, ""),
		std("401", ClassAuthRevoked, "unauthorized"),
		std("429", ClassRateLimited, "rate-limit"),
		std("408", ClassTransient, "request-timeout"),
		std("423", ClassTransient, "locked"),
		std("425", ClassTransient, "too-early"),
		std("503", ClassTransient, "unavailable"),
		std("400", ClassPermanent, "bad-request"),
		std("402", ClassPermanent, "payment-required"),
		std("403", ClassPermanent, "permission"),
		std("404", ClassPermanent, "not-found"),
		std("405", ClassPermanent, "method-not-allowed"),
		std("409", ClassPermanent, "conflict"),
		std("410", ClassPermanent, "gone"),
		std("413", ClassPermanent, "too-large"),
		std("414", ClassPermanent, "uri-too-long"),
		std("415", ClassPermanent, "unsupported-media-type"),
		std("422", ClassPermanent, "validation"),
		std("4xx", ClassPermanent, "client-error"),
		serverErrorRule("5xx", "", "server-error"),
		{Signal: Signal{Status: "other", Class: ClassUnknownOutcome, ReadClass: ClassPermanent, Reason: "unexpected-status",
			Note: "a status pacer does not follow (300, 304, 305, 306; the sender follows the other redirects itself): a mutation's effect is unknown"}},
	}
}

// serverErrorRule is an ambiguous server error: the provider may have acted
// before failing, so a mutation's outcome is unknown, unless it carried an
// idempotency key the provider honours; a read is transient.
func serverErrorRule(status, when, reason string) rule {
	return rule{Signal: Signal{
		Status: status, When: when, Class: ClassUnknownOutcome,
		ReadClass: ClassTransient, KeyedClass: ClassTransient, Reason: reason,
	}}
}

// standardReason is the standard rules' reason for status st; empty for
// success.
func standardReason(st int) string {
	for _, ru := range standardRules() {
		set, _ := parseStatusPattern(ru.Status)
		if set.has(st) {
			return ru.Reason
		}
	}
	return ""
}
