//go:build race

package main

// raceEnabled says the tests run with the race detector: the binary they
// build (pacerBin) gets it too.
const raceEnabled = true
