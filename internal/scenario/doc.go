// Package scenario runs behaviour tests written as files: one txtar archive
// holds a script, the config it applies and the proxies it connects, and
// the assertions on the xDS those proxies receive, so that one behaviour is
// one readable file (testdata/scenarios/*.txtar of engine and serve).
//
// # Format
//
// An archive's comment (the text before the first "-- name --" line) is the
// script, one command a line; "#" starts a comment. Its files are the
// inputs the commands name:
//
//	apply FILE...              decode, validate and convert the manifests
//	                           (the file source's pipeline) and publish them
//	replace FILE NEW           apply NEW's content as FILE's new version (an
//	                           edit: objects it no longer holds are deleted)
//	delete FILE                remove every object FILE's last apply made
//	proxy NAME FILE            connect proxy NAME; FILE is YAML with `id`
//	                           and `metadata` (the Envoy Node)
//	has NAME TYPE RES...       NAME's config of TYPE holds each resource
//	lacks NAME TYPE RES...     ... and none of these
//	count NAME TYPE N          ... exactly N resources
//	field NAME TYPE RES PATH JSON
//	                           the resource's field at PATH equals the JSON
//	                           value (protojson names: .a.b[0].c, and
//	                           [key=value] picks the list element whose key
//	                           field is the string value)
//	contains NAME TYPE RES TEXT
//	                           the resource's protojson text contains TEXT
//	excludes NAME TYPE RES TEXT
//	                           ... and does not
//	case CASE                  apply internal/istiodref case CASE's
//	                           config.yaml and connect each proxy of its
//	                           proxies.yaml, named as there
//	istiod NAME TYPE RES [PATH]
//	                           the resource (or its part at PATH) equals, field
//	                           by field, what real istiod sent the same proxy
//	                           for the same input (the case's istiod/NAME.json)
//
// TYPE is cds, eds, lds or rds. A proxy's config is fetched afresh for
// every assertion after a change, as a sidecar subscribes: every cluster
// and listener, the endpoints of each EDS cluster, each route configuration
// a listener names.
//
// # Targets
//
// The script runs against a [Target]: engine's tests fetch from
// engine.Conn.Generate, serve's over a real gRPC ADS stream. Both publish
// config through [Mesh], so the same file proves the same behaviour at both
// layers.
//
// Test support only: it imports ingest and index (and testing).
package scenario
