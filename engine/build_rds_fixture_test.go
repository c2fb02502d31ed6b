package engine

import (
	"github.com/pilotfish-mesh/pilotfish/encode"
)

func verifyCache() *encode.Cache {
	c := encode.NewCache()
	c.SetVerify(true)
	return c
}
