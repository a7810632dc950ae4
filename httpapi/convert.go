package httpapi

// convert returns f of each element of in, in order (an empty, non-nil
// slice for none: a list the API shows as []).
func convert[A, B any](in []A, f func(A) B) []B {
	out := make([]B, len(in))
	for i, a := range in {
		out[i] = f(a)
	}
	return out
}
