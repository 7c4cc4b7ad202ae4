// Package faultproxy is a TCP proxy for tests that injects network faults
// between a client and a real server: it drops traffic (a partition),
// delays it, resets connections with TCP RST and refuses new ones, either
// for the whole proxy or for one connection, and per direction.
//
// It exists so fault tests can exercise what SIGSTOP or killing the server
// cannot: a server that is alive but unreachable, a reply that is lost
// after the command ran, a single frozen pub/sub connection.
//
//	s := redistest.Start(t)
//	p := faultproxy.Start(t, s.Addr())
//	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
//	p.Blackhole(faultproxy.Both) // commands now time out
//	p.Heal()
//
// Faults model what the network would do, not what the peers would do:
// bytes dropped are gone for good, and a FIN or RST that arrives in a
// dropped direction is dropped too, so the other side keeps a half-open
// connection until the proxy closes it.
package faultproxy
