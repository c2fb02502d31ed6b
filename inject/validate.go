package inject

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	"istio.io/api/annotation"
)

// annotationChecks are the pod annotations istiod validates before
// injecting, with their checks: a pod with a bad value is denied rather
// than injected with a value the proxy or istio-iptables would choke on.
var annotationChecks = map[string]func(string) error{
	annotation.SidecarInterceptionMode.Name:                   checkInterceptionMode,
	annotation.SidecarStatusPort.Name:                         checkPort,
	annotation.SidecarStatusReadinessInitialDelaySeconds.Name: checkUint32,
	annotation.SidecarStatusReadinessPeriodSeconds.Name:       checkUint32,
	annotation.SidecarStatusReadinessFailureThreshold.Name:    checkUint32,
	annotation.SidecarTrafficIncludeOutboundIPRanges.Name:     func(v string) error { return checkCIDRs(v, true) },
	annotation.SidecarTrafficExcludeOutboundIPRanges.Name:     func(v string) error { return checkCIDRs(v, false) },
	annotation.SidecarTrafficIncludeInboundPorts.Name:         func(v string) error { return checkPorts(v, true) },
	annotation.SidecarTrafficExcludeInboundPorts.Name:         func(v string) error { return checkPorts(v, false) },
	annotation.SidecarTrafficExcludeOutboundPorts.Name:        func(v string) error { return checkPorts(v, false) },
	annotation.SidecarTrafficExcludeInterfaces.Name:           checkInterfaces,
	annotation.SidecarTrafficKubevirtInterfaces.Name:          checkInterfaces,
	annotation.IoIstioRerouteVirtualInterfaces.Name:           checkInterfaces,
	annotation.PrometheusMergeMetrics.Name:                    checkBool,
	annotation.ProxyConfig.Name:                               checkProxyConfig,
	annotation.SidecarProxyCPU.Name:                           checkQuantity,
	annotation.SidecarProxyMemory.Name:                        checkQuantity,
	annotation.SidecarProxyCPULimit.Name:                      checkQuantity,
	annotation.SidecarProxyMemoryLimit.Name:                   checkQuantity,
}

// validateAnnotations checks every annotation of annotationChecks the pod
// has, and names each bad one (in name order).
func validateAnnotations(ann map[string]string) error {
	var errs []error
	for name, check := range annotationChecks {
		v, ok := ann[name]
		if !ok {
			continue
		}
		if err := check(v); err != nil {
			errs = append(errs, fmt.Errorf("%w: %s=%q: %v", ErrAnnotation, name, v, err))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

func checkInterceptionMode(v string) error {
	switch v {
	case "REDIRECT", "TPROXY", "NONE":
		return nil
	}
	return errors.New("must be REDIRECT, TPROXY or NONE")
}

func checkPort(v string) error {
	_, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16)
	if err != nil {
		return fmt.Errorf("not a port: %q", v)
	}
	return nil
}

func checkUint32(v string) error {
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return errors.New("not a non-negative 32-bit integer")
	}
	return nil
}

func checkBool(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return errors.New("not a boolean")
	}
	return nil
}

// checkPorts: a comma-separated port list ("" allowed; "*" where star).
func checkPorts(v string, star bool) error {
	if star && v == "*" {
		return nil
	}
	if v = strings.TrimSpace(v); v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		if err := checkPort(p); err != nil {
			return err
		}
	}
	return nil
}

// checkCIDRs: a comma-separated CIDR list ("" allowed; "*" where star).
func checkCIDRs(v string, star bool) error {
	if (star && v == "*") || v == "" {
		return nil
	}
	for _, c := range strings.Split(v, ",") {
		if _, err := netip.ParsePrefix(c); err != nil {
			return fmt.Errorf("not a CIDR: %q", c)
		}
	}
	return nil
}

var interfaceName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.\-]*$`)

// checkInterfaces: a comma-separated list of Linux interface names.
func checkInterfaces(v string) error {
	if v == "" {
		return nil
	}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
			return errors.New("empty interface name")
		case len(n) > 15:
			return fmt.Errorf("interface name %q too long (max 15 chars)", n)
		case !interfaceName.MatchString(n):
			return fmt.Errorf("interface name %q contains invalid characters", n)
		}
	}
	return nil
}

func checkQuantity(v string) error {
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return errors.New("contains control characters")
	}
	if _, err := resource.ParseQuantity(v); err != nil {
		return errors.New("not a resource quantity")
	}
	return nil
}

// checkProxyConfig: the value must parse as a ProxyConfig (YAML or JSON).
// istiod also runs its full ProxyConfig validation here; pilotfish checks
// the shape and the ports and durations the templates render.
func checkProxyConfig(v string) error {
	pc, err := mergeProxyConfig(defaultProxyConfig(), []byte(v))
	if err != nil {
		return err
	}
	if p := pc.GetStatusPort(); p < 0 || p > 65535 {
		return fmt.Errorf("statusPort %d out of range", p)
	}
	if p := pc.GetProxyAdminPort(); p < 0 || p > 65535 {
		return fmt.Errorf("proxyAdminPort %d out of range", p)
	}
	return nil
}
