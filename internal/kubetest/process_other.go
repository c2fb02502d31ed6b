//go:build !linux

package kubetest

import "os/exec"

// setParentDeath is Linux-only; elsewhere t.Cleanup alone stops children.
func setParentDeath(*exec.Cmd) {}
