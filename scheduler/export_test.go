package scheduler

// Echoes lists the spellings in which a provider might echo v, each
// written by a standard encoder.
var Echoes = echoes

// TestSecret has every character an encoder treats specially.
const TestSecret = testSecret
