package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// istiod reads many settings from the environment (PILOT_DEBOUNCE_AFTER,
// ...). pilotfish honours the same variables as flag defaults: a flag given
// on the command line wins.

func envDuration(name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %s=%q is not a duration; using %s\n", name, v, def)
		return def
	}
	return d
}

func envInt(name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %s=%q is not an integer; using %d\n", name, v, def)
		return def
	}
	return n
}

func envBool(name string, def bool) bool {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %s=%q is not a boolean; using %t\n", name, v, def)
		return def
	}
	return b
}

// envFloat reads a number; istiod's PILOT_TRACE_SAMPLING out of range is
// refused by the engine, naming it.
func envFloat(name string, def float64) float64 {
	v, ok := os.LookupEnv(name)
	if !ok || v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "warning: %s=%q is not a number; using %v\n", name, v, def)
		return def
	}
	return f
}
