package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// clientEnv makes the test binary a loadgen client child (see Client):
// scenario tests re-run their own binary for the simulated proxies, so the
// servers have the test process to themselves.
const clientEnv = "PILOTFISH_BENCH_CLIENT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(clientEnv) == "1" {
		if err := ClientMain(context.Background(), os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childClient runs loadgen in a child copy of the test binary.
func childClient(t testing.TB) Client {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Client{Command: []string{exe}, Env: []string{clientEnv + "=1"}}
}
