package retryhttp

import "context"

// A Priority says who goes first when a key's sends wait for their slots
// (R27): a person waiting before a batch. It orders sends only while the
// Cooldown's limit binds; a key with nobody waiting sends at once, as
// before.
type Priority int8

// The Priorities, from the last to go to the first.
const (
	Background  Priority = -1 // batch work: every other send of its key goes first
	Normal      Priority = 0  // a call with no Budget and no WithPriority
	Interactive Priority = 1  // a person waits: a call carrying a Budget, unless WithPriority says otherwise
)

type priorityKey struct{}

// WithPriority returns a copy of ctx whose calls have priority p (R27). It
// wins over a Budget's default (Interactive); a p out of range counts as
// the nearest of Background and Interactive.
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p.clamp())
}

// String returns "background", "normal" or "interactive".
func (p Priority) String() string {
	switch p.clamp() {
	case Background:
		return "background"
	case Interactive:
		return "interactive"
	}
	return "normal"
}

func (p Priority) clamp() Priority { return min(max(p, Background), Interactive) }

// priorityOf is a call's Priority: WithPriority's, else Interactive when it
// carries a Budget (the public tier's turn: a person waits), else Normal.
func priorityOf(ctx context.Context, hasBudget bool) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok {
		return p
	}
	if hasBudget {
		return Interactive
	}
	return Normal
}
