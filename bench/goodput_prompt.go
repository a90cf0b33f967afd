package bench

// The prompts of a run with a token limit (issue 22): each call's size
// drawn from a fixed, seeded generator by the call's index, so that every
// client row and every run sends the same prompts in the same order.

import (
	"math"
	"math/rand/v2"
	"strings"
)

// Prompt sizes, in tokens: a triangular distribution from promptMin to
// promptMax whose mode is promptMode, so that its mean is (min + mode +
// max) / 3 = 1,500 and its median about 1,350: most prompts short, a few
// long, as a chat's are.
const (
	promptMin, promptMode, promptMax = 100, 400, 4000
)

// PromptTokens is the size in tokens of call i's prompt (i from 0) when the
// provider has a token limit: from 100 to 4,000, mean 1,500, drawn by a PCG
// seeded with Seed and i. Without a token limit it is 0.
func (c GoodputConfig) PromptTokens(i int) int {
	if c.TokenRate <= 0 {
		return 0
	}
	u := rand.New(rand.NewPCG(c.Seed, uint64(i))).Float64()
	const a, m, b = float64(promptMin), float64(promptMode), float64(promptMax)
	var x float64
	if u < (m-a)/(b-a) {
		x = a + math.Sqrt(u*(b-a)*(m-a))
	} else {
		x = b - math.Sqrt((1-u)*(b-a)*(b-m))
	}
	return int(math.Round(x))
}

// MeanPrompt is the mean of PromptTokens over the run's Calls calls (about
// 1,500); 0 without a token limit or without Calls.
func (c GoodputConfig) MeanPrompt() float64 {
	if c.TokenRate <= 0 || c.Calls <= 0 {
		return 0
	}
	sum := 0
	for i := range c.Calls {
		sum += c.PromptTokens(i)
	}
	return float64(sum) / float64(c.Calls)
}

// Body is what call i POSTs: with a token limit, a JSON chat request of
// exactly 4 × PromptTokens(i) bytes, so that the provider, charging
// ceil(len(body) ÷ 4), charges it PromptTokens(i) (with "max_tokens":1, as
// chatRequest has, an output cap of one token); else chatRequest.
func (c GoodputConfig) Body(i int) []byte {
	n := c.PromptTokens(i)
	if n <= 0 {
		return chatRequest
	}
	const head, tail = `{"model":"m","messages":[{"role":"user","content":"`, `"}],"max_tokens":1}`
	pad := max(0, 4*n-len(head)-len(tail))
	filler := strings.Repeat("Summarize the quarterly report in three bullet points. ", pad/55+1)[:pad]
	return []byte(head + filler + tail)
}

// tokens is what the provider charges call i on its token limit.
func (c GoodputConfig) tokens(i int) int {
	return (len(c.Body(i)) + 3) / 4
}
