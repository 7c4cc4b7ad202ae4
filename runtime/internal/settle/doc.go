// Package settle is the settler: one goroutine per Client that goes on, in
// the background, with work that must reach Redis but could not in the
// call that needed it. A Job is a function tried until it reports done,
// and a time after which it is given up.
//
// Invariants:
//
//   - the goroutine runs only while there is work: a partition that ends
//     thousands of holds makes one queue, tried one job at a time and
//     paused with a backoff while Redis does not answer, not thousands of
//     goroutines polling a pool of a few connections;
//   - a failed attempt ends the round: the jobs after it wait with it for
//     the backoff, and it goes behind them, so a job that always fails
//     delays the others by a backoff, not by its lifetime;
//   - every attempt runs under a ctx bounded by Config.Try and ended by
//     Config.Life (Close cancels nothing: the Client ends Life before it
//     calls Close), so a call stuck on a dead connection ends there;
//   - every job Added before Close either reports done or has its Quit run
//     exactly once (it was given up, or Config.Life ended), and Close waits
//     for that; a job Added after Close is dropped, its Quit not run.
package settle
