//go:build race

package engine

// raceDetector: the tests run under the race detector, whose builds allocate more per object.
const raceDetector = true
