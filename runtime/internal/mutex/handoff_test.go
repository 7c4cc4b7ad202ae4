package mutex

import (
	"testing"
)

// Every grantStreak-th release of one lock publishes instead of granting.
func TestGrantStreakPublishesEveryStreakth(t *testing.T) {
	var g grantStreaks
	published := 0
	for range 4 * grantStreak {
		if !g.allow("order:1") {
			published++
		}
	}
	if published != 4 {
		t.Errorf("%d of %d releases published, want 4", published, 4*grantStreak)
	}
}

// Only an error that says the server will never run the hand-off script
// turns hand-offs off: ACL refusals as each Redis version words them, or
// PUBSUB barred in scripts.
func TestRefusesHandoff(t *testing.T) {
	for msg, want := range map[string]bool{
		"NOPERM this user has no permissions to run the 'pubsub' command":        true,
		"ERR The user executing the script can't run this command or subcommand": true,
		"ERR This Redis command is not allowed from script":                      true,
		"LOADING Redis is loading the dataset in memory":                         false,
		"READONLY You can't write against a read only replica.":                  false,
	} {
		if got := refusesHandoff(redisError(msg)); got != want {
			t.Errorf("refusesHandoff(%q) = %v, want %v", msg, got, want)
		}
	}
}

type redisError string

func (e redisError) Error() string { return string(e) }
func (e redisError) RedisError()   {}
