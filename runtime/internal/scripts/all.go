package scripts

import "github.com/lockgen/lockgen/lua"

// One Script per file of package lua (lua.go documents each one's keys,
// arguments and replies).
var (
	Acquire               = New(lua.Acquire)
	Settle                = New(lua.Settle)
	Release               = New(lua.Release)
	Handoff               = New(lua.Handoff)
	MutexLeave            = New(lua.MutexLeave)
	RenewBatch            = New(lua.RenewBatch)
	ForceUnlock           = New(lua.ForceUnlock)
	FairAcquire           = New(lua.FairAcquire)
	FairRelease           = New(lua.FairRelease)
	FairLeave             = New(lua.FairLeave)
	FairForceUnlock       = New(lua.FairForceUnlock)
	ReadAcquire           = New(lua.ReadAcquire)
	ReadRelease           = New(lua.ReadRelease)
	WriteAcquire          = New(lua.WriteAcquire)
	WriteRelease          = New(lua.WriteRelease)
	WriteLeave            = New(lua.WriteLeave)
	RWForceUnlock         = New(lua.RWForceUnlock)
	MultiAcquire          = New(lua.MultiAcquire)
	MultiRelease          = New(lua.MultiRelease)
	FencedAcquire         = New(lua.FencedAcquire)
	SemaphoreAcquire      = New(lua.SemaphoreAcquire)
	SemaphoreRelease      = New(lua.SemaphoreRelease)
	SemaphoreSettle       = New(lua.SemaphoreSettle)
	SemaphoreTrySet       = New(lua.SemaphoreTrySet)
	SemaphoreAdd          = New(lua.SemaphoreAdd)
	SemaphoreDrain        = New(lua.SemaphoreDrain)
	PlainSemaphoreAcquire = New(lua.PlainSemaphoreAcquire)
	PlainSemaphoreRelease = New(lua.PlainSemaphoreRelease)
	LatchTrySet           = New(lua.LatchTrySet)
	LatchCountDown        = New(lua.LatchCountDown)
	LatchDelete           = New(lua.LatchDelete)
)
