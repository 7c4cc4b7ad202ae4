package runtime

import "github.com/lockgen/lockgen/internal/redisnames"

// Key and channel names follow Redisson's helpers exactly (package
// redisnames), so that Redisson and lockgen find the same keys and
// channels for the same lock name.

// prefixName is Redisson's prefixName: "p:{name}", or "p:name" when name
// already carries a hash tag.
func prefixName(prefix, name string) string { return redisnames.Prefix(prefix, name) }

// suffixName is Redisson's suffixName: "{name}:s", or "name:s" when name
// already carries a hash tag.
func suffixName(name, suffix string) string { return redisnames.Suffix(name, suffix) }
