package encode

import (
	"google.golang.org/protobuf/proto"

	"github.com/pilotfish-mesh/pilotfish/index"
)

// SecretType is the type URL of SDS resources.
const SecretType = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"

// SecretKey holds every input of one credential resource: the name the
// proxy asked for, whether it is the CA half, and the Secret row (a
// ConfigSecret whose Spec is the credential keys' data).
type SecretKey struct {
	Resource string
	CA       bool
	Secret   *index.Config
}

// Hash feeds every field of the key (0 allocations).
func (k *SecretKey) Hash() uint64 {
	h := NewHasher("secret")
	h.Str(k.Resource)
	h.Bool(k.CA)
	clHashConfig(&h, k.Secret)
	return h.Sum()
}

// CredentialSecret builds the Secret k names; ok is false when the Secret
// cannot serve it (keys missing, PEM invalid: err says why, naming the
// Secret and the keys, never the material).
func CredentialSecret(n index.Names, k *SecretKey) (msg proto.Message, err error) {
	data, _ := k.Secret.Spec.(map[string][]byte)
	id := n.String(k.Secret.Key.Namespace) + "/" + n.String(k.Secret.Key.Name)
	s, err := ParseCredential(id, data).Secret(k.Resource, k.CA)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// SecretGen generates SecretKey's credential.
var SecretGen = resourceGen(KindSecret, SecretType, SecretResource)

// SecretResource is CredentialSecret as a cache generator, for a key whose
// Secret is known to serve it (CredentialSecret returned no error).
func SecretResource(n index.Names, k *SecretKey) (string, proto.Message) {
	m, err := CredentialSecret(n, k)
	if err != nil {
		panic("encode: SecretResource of a key CredentialSecret refuses: " + err.Error())
	}
	return k.Resource, m
}
