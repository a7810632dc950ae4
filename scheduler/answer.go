package scheduler

// AttemptAnswerLimit bounds the body each attempt keeps of an answer that
// did not succeed. The operation keeps its last answer whole (up to the
// result limit) in LastOutcome.Response; an operation may make many
// attempts (rate-limited ones do not count toward MaxAttempts), so each
// keeps only what an error body usually needs, and a long history stays
// small.
const AttemptAnswerLimit = 8 << 10

// keptAnswers returns what a completion keeps of an attempt's answer res
// (already redacted and bounded by the result limit, see send): nothing
// for a success, whose Result holds it, or without an answer; else the
// answer for the operation and a copy for the attempt with its body cut to
// AttemptAnswerLimit by red, so a cut never leaves part of a secret.
func keptAnswers(res *Result, succeeded bool, red *redactor) (op, attempt *Result) {
	if res == nil || succeeded {
		return nil, nil
	}
	body := red.bound(string(res.Body), AttemptAnswerLimit)
	attempt = &Result{Status: res.Status, Headers: res.Headers, Body: []byte(body), Truncated: res.Truncated || len(body) < len(res.Body)}
	if len(attempt.Body) == 0 {
		attempt.Body = nil
	}
	return res, attempt
}
