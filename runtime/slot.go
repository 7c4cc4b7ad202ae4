package runtime

import "strings"

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// keySlot returns the cluster slot of key: CRC16 (XMODEM) of the key, or of
// its hash tag (the text between the first "{" and the next "}" when that is
// not empty), modulo 16384.
func keySlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return int(crc16(key) % clusterSlots)
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
