package gateway

import (
	"github.com/taskgate/taskgate/gateway/internal/gwtest"
)

// The Handler tests use the fronts' tests' clients (gwtest.Client,
// gwtest.ModernClient), answers, policies and helpers (internal/gwtest),
// some of them under the names these tests call them.

type (
	rpcReply = gwtest.Reply
	wireTask = gwtest.WireTask
	detailed = gwtest.Detailed
)

const directWait = gwtest.DirectWait

var (
	readMessages   = gwtest.ReadMessages
	scanMessages   = gwtest.ScanMessages
	reply          = gwtest.OneReply
	resultText     = gwtest.ResultText
	rules          = gwtest.Rules
	withWait       = gwtest.WithWait
	rulesPolicy    = gwtest.RulesPolicy
	hybridPolicy   = gwtest.HybridPolicy
	decodeDetailed = gwtest.DecodeDetailed
	eras           = gwtest.Eras
	mpost          = gwtest.MPost
	modernMeta     = gwtest.ModernMeta
	okResult       = gwtest.OKResult
	initBody       = gwtest.InitBody
)
