package loadgen

// xtype is a resource type a simulated proxy follows.
type xtype uint8

const (
	typeCDS xtype = iota
	typeEDS
	typeLDS
	typeRDS
	numTypes
	// typeOther is any other type URL: counted and ACKed, not held.
	typeOther = numTypes
)

// Type URLs of the followed types.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
)

var typeURLs = [numTypes]string{ClusterType, EndpointType, ListenerType, RouteType}

// typeNames are the short names used in flags (--expect-resource cds/NAME),
// tables and JSON.
var typeNames = [numTypes + 1]string{"cds", "eds", "lds", "rds", "other"}

func (t xtype) String() string { return typeNames[t] }

// typeOfURL maps a type URL to its xtype without allocating.
func typeOfURL(url []byte) xtype {
	for t, u := range typeURLs {
		if string(url) == u {
			return xtype(t)
		}
	}
	return typeOther
}

// typeOfName maps a short name (cds, eds, lds, rds) to its xtype.
func typeOfName(name string) (xtype, bool) {
	for t := range numTypes {
		if typeNames[t] == name {
			return t, true
		}
	}
	return 0, false
}

func (r *response) setType(url []byte) {
	r.t = typeOfURL(url)
	if r.t == typeOther {
		r.typeURL = string(url)
	}
}

// url returns the type URL of r.
func (r *response) url() string {
	if r.t == typeOther {
		return r.typeURL
	}
	return typeURLs[r.t]
}
