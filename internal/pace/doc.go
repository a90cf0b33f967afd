// Package pace is a Cooldown's pacing policy (RULES.md R17, R23): what one
// provider's answer does to one lane's rate. Hear is a pure function of a
// lane's Rates, what the answer says of the lane (News) and when, and says
// what to do (Effect): the rates after it, a hold, where the provider's
// bucket stands. The Cooldown runs it in Go, in every process, and a Store
// (package store) keeps only its results; policy_test.go exhausts it.
//
// The words it uses: a lane's rate is the provider's stated one (from its
// counts, Rates.Stated) or one learned from its 429s (Rates.Learned); a cut
// slows a learned rate after a 429, a ramp grows it fast until the first
// cut; a generation names a rate, so that a 429 to a send paced at an older
// one says nothing of the rate now; a lane is idle once the provider has
// not limited it for IdleAfter.
package pace
