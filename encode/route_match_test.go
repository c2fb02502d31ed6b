package encode

import "testing"

func TestLabelsHold(t *testing.T) {
	const labels = "app=productpage\nversion=v1"
	tests := []struct {
		name string
		want map[string]string
		ok   bool
	}{
		{"none asked", nil, true},
		{"one of them", map[string]string{"app": "productpage"}, true},
		{"both", map[string]string{"app": "productpage", "version": "v1"}, true},
		{"other value", map[string]string{"version": "v2"}, false},
		{"value is a prefix", map[string]string{"app": "product"}, false},
		{"value extends it", map[string]string{"version": "v10"}, false},
		{"key is a suffix", map[string]string{"pp": "productpage"}, false},
		{"missing key", map[string]string{"zone": "a"}, false},
		{"one of two missing", map[string]string{"app": "productpage", "zone": "a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := labelsHold(labels, tt.want); got != tt.ok {
				t.Errorf("labelsHold(%q, %v) = %v, want %v", labels, tt.want, got, tt.ok)
			}
		})
	}
	if labelsHold("", map[string]string{"app": ""}) {
		t.Error("an empty label set holds app=\"\"")
	}
	if !labelsHold("app=", map[string]string{"app": ""}) {
		t.Error("app= does not hold app=\"\"")
	}
}
