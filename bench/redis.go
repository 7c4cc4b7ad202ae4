package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server this run started on a loopback port, so every
// library is measured against the same, otherwise idle, Redis.
type server struct {
	cmd  *exec.Cmd
	addr string
	port int
	dir  string
}

func startRedis(bin string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	return startRedisOn(bin, port, "redis")
}

// startRedisOn starts redis-server on port with the bench's settings and
// extra arguments (a cluster node's), and waits until it answers.
func startRedisOn(bin string, port int, label string, extra ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "lockgen-bench-"+label+"-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--maxclients", "10000", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w (install redis-server or pass -redis-server)", bin, err)
	}
	s := &server{cmd: cmd, addr: fmt.Sprintf("127.0.0.1:%d", port), port: port, dir: dir}
	rdb := redis.NewClient(&redis.Options{Addr: s.addr})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := rdb.Ping(context.Background()).Err(); err == nil {
			return s, nil
		} else if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// info parses one INFO section into key -> value.
func info(ctx context.Context, rdb *redis.Client, section string) (map[string]string, error) {
	s, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, err
	}
	return parseFields(s), nil
}

// parseFields parses "key:value" lines (INFO, CLUSTER INFO).
func parseFields(s string) map[string]string {
	m := make(map[string]string)
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = v
		}
	}
	return m
}

// cmdStats is INFO commandstats: calls per command. Redis counts the
// commands a Lua script runs (redis.call) here too, besides the EVALSHA.
type cmdStats map[string]int64

// ignoredStats are the bench's own bookkeeping commands.
var ignoredStats = map[string]bool{"info": true, "config|resetstat": true, "flushall": true, "dbsize": true, "client|list": true}

func commandStats(ctx context.Context, rdb *redis.Client) (cmdStats, error) {
	m, err := info(ctx, rdb, "commandstats")
	if err != nil {
		return nil, err
	}
	st := make(cmdStats)
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || ignoredStats[name] {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				st[name] = c
			}
		}
	}
	return st, nil
}

// sub returns s - before for every command, dropping zeros.
func (s cmdStats) sub(before cmdStats) cmdStats {
	d := make(cmdStats)
	for k, v := range s {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

func (s cmdStats) total() int64 {
	var n int64
	for _, v := range s {
		n += v
	}
	return n
}

// redisCPU is Redis' own CPU time (user + sys) so far.
func redisCPU(ctx context.Context, rdb *redis.Client) time.Duration {
	m, err := info(ctx, rdb, "cpu")
	if err != nil {
		return 0
	}
	var sec float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		f, _ := strconv.ParseFloat(m[k], 64)
		sec += f
	}
	return time.Duration(sec * float64(time.Second))
}
