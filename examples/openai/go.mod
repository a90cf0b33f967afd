module github.com/retryhttp/retryhttp/examples/openai

go 1.26.0

require (
	github.com/openai/openai-go/v3 v3.98.0
	github.com/retryhttp/retryhttp v0.0.0-20261205010741-182e349b2f36
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require (
	github.com/benbjohnson/clock v1.3.5 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	go.uber.org/multierr v1.10.0 // indirect
)
