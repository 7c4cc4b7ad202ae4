package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The idle floor: what a hand-off costs on this machine when nothing but
// the hand-off runs. redis-benchmark's round trip (physicalLimit) is taken
// back to back, with the client, Redis and the loopback busy; a hand-off
// after a slept hold starts from processes that were idle, and waking an
// idle process (and its vCPU, on a VM) costs more than the round trip
// itself. So two more floors are taken with every process idle for
// floorIdle before each sample:
//
//   - a script round trip (EVALSHA of a one-read script) from this
//     process: the floor of a hand-off inside one process, where the
//     release script gives the lock to a waiter of its own process;
//   - a message across processes: a script PUBLISHes the time it was sent
//     and another process's subscriber takes it off its connection. This
//     is the floor of any hand-off between processes (release script
//     here, message to the next owner there), with no lock work at all.

// floorIdle is how long every process idles before a sample: longer than
// the netpoller's 1 ms wait, shorter than a think time.
const floorIdle = 2 * time.Millisecond

// floorRow is one idle floor.
type floorRow struct {
	What string
	Dist dist
}

// idleFloor measures the two idle floors with n samples each.
func (b *bench) idleFloor(n int) ([]floorRow, error) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: b.srv.addr})
	defer rdb.Close()
	read := redis.NewScript("return redis.call('exists', KEYS[1])")
	if err := read.Load(ctx, rdb).Err(); err != nil {
		return nil, err
	}
	rtt := make([]time.Duration, 0, n)
	for range n + n/10 { // the first tenth warms up
		time.Sleep(floorIdle)
		t0 := time.Now()
		if err := read.EvalSha(ctx, rdb, []string{"bench:floor"}).Err(); err != nil {
			return nil, err
		}
		rtt = append(rtt, time.Since(t0))
	}
	msg, err := b.messageFloor(ctx, rdb, n)
	if err != nil {
		return nil, err
	}
	return []floorRow{
		{"script round trip, one process", newDist(rtt[n/10:])},
		{"message to another process (script PUBLISH → subscriber)", newDist(msg)},
	}, nil
}

// floorChannel is the channel of the message floor.
const floorChannel = "bench:floor"

// messageFloor starts a subscriber process (this binary with -floor) and
// publishes n+n/10 timestamps to it through a script, idle between them;
// the subscriber reports how long each took to reach it.
func (b *bench) messageFloor(ctx context.Context, rdb *redis.Client, n int) ([]time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	total := n + n/10
	cmd := exec.Command(exe, "-floor", b.srv.addr, strconv.Itoa(total))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = cmd.Wait() }()
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("floor subscriber did not get ready: %q %v", line, err)
	}
	pub := redis.NewScript("return redis.call('publish', KEYS[1], ARGV[1])")
	if err := pub.Load(ctx, rdb).Err(); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	for range total {
		time.Sleep(floorIdle)
		if err := pub.EvalSha(ctx, rdb, []string{floorChannel}, monoNow()).Err(); err != nil {
			_ = cmd.Process.Kill()
			return nil, err
		}
	}
	var got []time.Duration
	if err := json.NewDecoder(out).Decode(&got); err != nil {
		return nil, fmt.Errorf("floor subscriber: %w", err)
	}
	if len(got) != total {
		return nil, fmt.Errorf("floor subscriber heard %d of %d messages", len(got), total)
	}
	return got[n/10:], nil
}

// floorMain is the subscriber of messageFloor: it subscribes, says ready,
// times n messages against the clock all processes share and writes the
// times as JSON.
func floorMain(addr string, n int) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ps := rdb.Subscribe(ctx, floorChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		return err
	}
	fmt.Println("ready")
	got := make([]time.Duration, 0, n)
	for len(got) < n {
		m, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return err
		}
		now := monoNow()
		sent, err := strconv.ParseInt(m.Payload, 10, 64)
		if err != nil {
			return fmt.Errorf("floor message %q: %w", m.Payload, err)
		}
		got = append(got, time.Duration(now-sent))
	}
	return json.NewEncoder(os.Stdout).Encode(got)
}
