package encode

import (
	"testing"

	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// TestPathNormalizationFields: each meshConfig pathNormalization value
// sets the HCM fields istiod's buildHTTPConnectionManager sets for it (the
// case mesh-listener compares MERGE_SLASHES with istiod's output).
func TestPathNormalizationFields(t *testing.T) {
	for _, tc := range []struct {
		p       PathNormalization
		norm    bool
		merge   bool
		escaped hcm.HttpConnectionManager_PathWithEscapedSlashesAction
	}{
		{PathNormalizeBase, true, false, hcm.HttpConnectionManager_KEEP_UNCHANGED},
		{PathNormalizeNone, false, false, hcm.HttpConnectionManager_KEEP_UNCHANGED},
		{PathNormalizeMergeSlashes, true, true, hcm.HttpConnectionManager_KEEP_UNCHANGED},
		{PathNormalizeDecodeAndMergeSlashes, true, true, hcm.HttpConnectionManager_UNESCAPE_AND_FORWARD},
	} {
		h := lsHCM(hcmOpts{rds: "80", path: tc.p})
		if h.GetNormalizePath().GetValue() != tc.norm || h.GetMergeSlashes() != tc.merge || h.GetPathWithEscapedSlashesAction() != tc.escaped {
			t.Errorf("%d: normalize_path %v merge_slashes %v escaped %v, want %v %v %v", tc.p,
				h.GetNormalizePath().GetValue(), h.GetMergeSlashes(), h.GetPathWithEscapedSlashesAction(), tc.norm, tc.merge, tc.escaped)
		}
		if h.NormalizePath == nil {
			t.Errorf("%d: normalize_path unset; istiod always writes it", tc.p)
		}
	}
}

// TestMeshRetryPolicy: the mesh's default replaces istiod's built-in one
// where a route sets no retries; attempts 0 turns retries off.
func TestMeshRetryPolicy(t *testing.T) {
	var unset HTTPRetry
	if unset.policy(false) != rtDefaultRetryPolicy || unset.policy(true) != rtDefaultHashRetryPolicy {
		t.Error("an unset mesh policy is not istiod's built-in default")
	}
	off := HTTPRetry{Set: true}
	if off.policy(false) != nil {
		t.Error("attempts 0 does not turn retries off")
	}
	r := HTTPRetry{Set: true, Attempts: 5, RetryOn: "5xx,429", HasIgnorePreviousHosts: true}
	p := r.policy(false)
	if p.GetNumRetries().GetValue() != 5 || p.GetRetryOn() != "5xx,retriable-status-codes" || len(p.GetRetriableStatusCodes()) != 1 || len(p.GetRetryHostPredicate()) != 0 {
		t.Errorf("policy %v", p)
	}
}
