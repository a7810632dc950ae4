package providers

// classifyStatus is the standards-only reading of a response's status
// (RFC 9110, RFC 6585) that profiles fall back to: its class and reason.
//
// A 5xx other than 503 may have come after the provider acted, so for a
// mutation it is an unknown outcome unless the request carried an
// idempotency key the provider honours (a resend with the same key is then
// safe). 503 and 408 say the request was not processed. A status outside the
// 2xx, 4xx and 5xx ranges (a redirect pacer does not follow) is unexpected:
// a mutation's effect is then unknown, a read fails.
func classifyStatus(ex Exchange) (Class, string) {
	st := ex.Response.StatusCode
	switch st {
	case 401:
		return ClassAuthRevoked, "unauthorized"
	case 429:
		return ClassRateLimited, "rate-limit"
	case 408:
		return ClassTransient, "request-timeout"
	case 423:
		return ClassTransient, "locked"
	case 425:
		return ClassTransient, "too-early"
	case 503:
		return ClassTransient, "unavailable"
	case 400:
		return ClassPermanent, "bad-request"
	case 402:
		return ClassPermanent, "payment-required"
	case 403:
		return ClassPermanent, "permission"
	case 404:
		return ClassPermanent, "not-found"
	case 405:
		return ClassPermanent, "method-not-allowed"
	case 409:
		return ClassPermanent, "conflict"
	case 410:
		return ClassPermanent, "gone"
	case 413:
		return ClassPermanent, "too-large"
	case 414:
		return ClassPermanent, "uri-too-long"
	case 415:
		return ClassPermanent, "unsupported-media-type"
	case 422:
		return ClassPermanent, "validation"
	}
	switch {
	case st >= 200 && st < 300:
		return ClassSuccess, ""
	case st >= 400 && st < 500:
		return ClassPermanent, "client-error"
	case st >= 500 && st < 600:
		return serverError(ex, false)
	case ex.Mutation:
		return ClassUnknownOutcome, "unexpected-status"
	}
	return ClassPermanent, "unexpected-status"
}

// serverError classifies a 5xx that may have come after the provider acted:
// transient for a read, or for a mutation that carried an idempotency key
// (ex.IdempotencyKeySent); otherwise an unknown outcome. noKeys says the
// provider honours no keys, so every mutation's outcome is unknown.
func serverError(ex Exchange, noKeys bool) (Class, string) {
	if ex.Mutation && (noKeys || !ex.IdempotencyKeySent) {
		return ClassUnknownOutcome, "server-error"
	}
	return ClassTransient, "server-error"
}
