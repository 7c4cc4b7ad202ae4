package scripts

import "strings"

// ClusterSlots is the number of hash slots of a Redis Cluster.
const ClusterSlots = 16384

// KeySlot returns the cluster slot of key: CRC16 (XMODEM) of the key, or of
// its hash tag (the text between the first "{" and the next "}" when that is
// not empty), modulo 16384.
func KeySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % ClusterSlots)
}

func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
