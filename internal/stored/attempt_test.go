package stored

import "testing"

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is 2 bytes: not split
		{"éé", 3, "é"},
		{"é", 0, ""},
	} {
		if got := Bound(tc.s, tc.n); got != tc.want {
			t.Errorf("Bound(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
