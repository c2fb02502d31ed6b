package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pilotfish-mesh/pilotfish/ingest"
)

func newValidateCommand() *cobra.Command {
	var strict bool
	var meshFiles []string
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check Kubernetes and Istio manifests the way istiod would",
		Long: `validate decodes and validates manifests before they reach a mesh: the
Kubernetes objects pilotfish reads (Service, EndpointSlice, Pod, Namespace)
and Istio's networking and security config (VirtualService, DestinationRule,
Gateway, ServiceEntry, WorkloadEntry, Sidecar, AuthorizationPolicy,
PeerAuthentication, RequestAuthentication, EnvoyFilter) and Telemetry, in any
accepted API
version.

Directories are read exactly as "serve --config-dir" reads them, so both
report the same problems: recursively, .yaml, .yml and .json files; hidden
entries (".git", a ConfigMap volume's "..data") are skipped; symbolic links
to files are followed, links to directories are not (a warning); a named
pipe, device, socket, dangling link, link loop or file over 16 MiB is an
error and is never read. A file named explicitly is read whatever its
extension. An object defined twice is used from its first definition in
path order; every later one is an error.

Documents of a kind pilotfish does not read: a kind a mesh API group (core,
discovery.k8s.io, networking.k8s.io, Istio's, the Gateway API's) does not
have (a misspelling such as VirtualServize) is an error; Istio and Gateway
API kinds pilotfish does not implement (HTTPRoute, ProxyConfig, ...) are
warnings (an EnvoyFilter is validated and applied, its EXTENSION_CONFIG
patches served over ECDS); other Kubernetes kinds (ConfigMaps, Deployments, ...) and
other projects' kinds are skipped.

Fields pilotfish does not support (docs/compatibility.md lists every field
of every Istio kind: honoured, or not supported and why) are warnings that
name the field and say what happens instead, e.g.
  vs.yaml:14: warning: VirtualService shop/db: spec.tcp[0].match[0].sourceSubnet: not supported by pilotfish: ...
Nothing pilotfish ignores is accepted silently.

The mesh config is checked too, as serve reads it (docs/mesh-config.md): the
key mesh of every ConfigMap istio in the files (serve uses the first of a
--config-dir), and the files given with --mesh-config. A field istiod's
validation refuses is an error; an unknown field, or a field pilotfish does
not honour, is a warning naming the field and its line in the file, e.g.
  mesh.yaml:9: warning: MeshConfig istio-system/istio: mesh.localityLbSetting: not supported by pilotfish: ...

Each problem is printed to stderr on its own line as
  file:line: Kind namespace/name: field.path: message
  file:line: warning: Kind namespace/name: message
and a summary ("N objects, M errors", then ", K warnings" if there are any)
to stdout. The exit status is 1 if there is any error, 0 otherwise
(warnings alone exit 0); with --strict, a warning fails too.`,
		Example: `  # Check one file
  pilotfish validate reviews-vs.yaml

  # Check a config directory and a JSON export before applying them
  pilotfish validate ./mesh-config/ istio-export.json

  # In CI: fail the job on the first bad manifest
  pilotfish validate deploy/ || exit 1

  # ... and on anything pilotfish would ignore
  pilotfish validate --strict deploy/

  # A mesh config file (serve's --mesh-config)
  pilotfish validate --mesh-config mesh.yaml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(meshFiles) == 0 {
				return errors.New("requires at least 1 arg(s), or --mesh-config")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var report ingest.Report
			if len(args) > 0 {
				var err error
				if report, err = ingest.ValidatePaths(args...); err != nil {
					return &exitError{code: 1, err: err}
				}
			}
			meshConfigs, err := validateMesh(&report, args, meshFiles)
			if err != nil {
				return &exitError{code: 1, err: err}
			}
			for _, e := range report.Problems() {
				fmt.Fprintln(cmd.ErrOrStderr(), e)
			}
			summary := plural(len(report.Objects)+meshConfigs, "object") + ", " + plural(len(report.Errors), "error")
			if len(report.Warnings) > 0 {
				summary += ", " + plural(len(report.Warnings), "warning")
			}
			fmt.Fprintln(cmd.OutOrStdout(), summary)
			if len(report.Errors) > 0 {
				return &exitError{code: 1, err: errors.New("validation failed")}
			}
			if strict && len(report.Warnings) > 0 {
				return &exitError{code: 1, err: errors.New("validation failed: --strict and " + plural(len(report.Warnings), "warning"))}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&meshFiles, "mesh-config", nil, "a mesh config file to check (the `mesh` key of ConfigMap istio, as serve's --mesh-config reads it); repeatable")
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings (unsupported fields and kinds, links to directories) as errors: exit 1")
	return cmd
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
