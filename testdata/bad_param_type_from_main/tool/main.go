// Command tool declares a key type in package main, which cannot be imported.
package main

// Name is a string key type of a program.
type Name string

func main() {}
