package providers

// ruleFor is the index of the rule that decides ex: below the number of
// the profile's own signals, that signal of Describe().Signals.
func (t *table) ruleFor(ex Exchange) int { return t.match(newReading(ex)) }

// MatchedSignal returns the index in p.Describe().Signals of the signal
// that decides ex, or -1 when a standard rule decides it. ok is false for
// a profile that is not made of rules.
func MatchedSignal(p Profile, ex Exchange) (index int, ok bool) {
	rt, ok := p.(interface{ ruleFor(Exchange) int })
	if !ok || ex.Response == nil {
		return -1, false
	}
	i := rt.ruleFor(ex)
	if i >= len(p.Describe().Signals) {
		return -1, true
	}
	return i, true
}
