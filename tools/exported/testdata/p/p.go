package p

// A, B and c: two exported consts.
const A, B, c = 1, 2, 3

// V is one var.
var V int

// F is one func.
func F() {}

// T is a type with an exported field, a constructor and a method: four.
type T struct {
	X, y int
}

// NewT is T's constructor.
func NewT() T { return T{} }

// M is T's method.
func (T) M() {}

func (T) m() {}
