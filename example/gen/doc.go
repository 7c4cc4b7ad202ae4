// Package gen holds the lock helpers generated from ../locks.yaml. Do not
// edit locks_gen.go: change the spec and run go generate.
package gen

//go:generate go run ../../cmd/lockgen -config ../locks.yaml
