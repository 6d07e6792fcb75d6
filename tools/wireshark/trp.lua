-- SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
-- trp.lua: a Wireshark dissector for TRP, the shim of iWARP over UDP
-- (seed 003; the protocol is doc/trp.md).
--
--   tshark -X lua_script:tools/wireshark/trp.lua -r capture.pcapng -V
--
-- Every UDP datagram of a TRP connection is a 10-byte header (PSN, ack
-- PSN, flags I A F R, 12-bit credits) and a body: a DDP segment (handed
-- to Wireshark's own iWARP DDP/RDMAP dissector), an MPA request or reply
-- frame (I packets), selective-ack blocks (A packets) or nothing (F).
-- TRP has no port of its own: a UDP conversation is recognised by its
-- first I packet (an MPA request or reply frame after the header) and
-- remembered; the preference trp.ports adds fixed ports.  On a port
-- Wireshark gives another protocol (41170 is Manolito's), that one wins
-- unless heuristics are asked first: add -o udp.try_heuristic_first:TRUE.

local trp = Proto("trp", "Trivial Reliability Protocol (iWARP over UDP)")

local F = trp.fields
F.psn = ProtoField.uint32("trp.psn", "PSN", base.DEC)
F.ack = ProtoField.uint32("trp.ack", "Acknowledgement PSN", base.DEC)
F.flags = ProtoField.uint16("trp.flags", "Flags", base.HEX, nil, 0xF000)
F.f_i = ProtoField.bool("trp.flags.init", "Init (I)", 16, nil, 0x8000)
F.f_a = ProtoField.bool("trp.flags.ack", "Ack / selective ack (A)", 16, nil, 0x4000)
F.f_f = ProtoField.bool("trp.flags.fin", "Fin (F)", 16, nil, 0x2000)
F.f_r = ProtoField.bool("trp.flags.reserved", "Reserved (R)", 16, nil, 0x1000)
F.credits = ProtoField.uint16("trp.credits", "Credits", base.DEC, nil, 0x0FFF)
F.limit = ProtoField.uint32("trp.limit", "Peer may send up to PSN", base.DEC)
F.kind = ProtoField.string("trp.kind", "Packet kind")
F.sack = ProtoField.bytes("trp.sack", "Selective ack block")
F.sack_first = ProtoField.uint32("trp.sack.first", "First PSN", base.DEC)
F.sack_last = ProtoField.uint32("trp.sack.last", "Last PSN", base.DEC)
F.mpa_key = ProtoField.string("trp.mpa.key", "MPA key")
F.mpa_flags = ProtoField.uint8("trp.mpa.flags", "MPA flags", base.HEX)
F.mpa_m = ProtoField.bool("trp.mpa.flags.markers", "Markers (M)", 8, nil, 0x80)
F.mpa_c = ProtoField.bool("trp.mpa.flags.crc", "CRC (C)", 8, nil, 0x40)
F.mpa_rj = ProtoField.bool("trp.mpa.flags.reject", "Reject (R)", 8, nil, 0x20)
F.mpa_e = ProtoField.bool("trp.mpa.flags.enhanced", "Enhanced connection setup", 8, nil, 0x10)
F.mpa_rev = ProtoField.uint8("trp.mpa.rev", "MPA revision", base.DEC)
F.mpa_pdlen = ProtoField.uint16("trp.mpa.pd_length", "Private data length", base.DEC)
F.mpa_ird = ProtoField.uint16("trp.mpa.ird", "IRD word", base.HEX)
F.mpa_ord = ProtoField.uint16("trp.mpa.ord", "ORD word", base.HEX)
F.mpa_pdata = ProtoField.bytes("trp.mpa.pdata", "Private data")

local e_reserved = ProtoExpert.new("trp.reserved_set", "R set: protocol error",
				   expert.group.MALFORMED, expert.severity.ERROR)
local e_short = ProtoExpert.new("trp.short", "Shorter than the TRP header",
				expert.group.MALFORMED, expert.severity.ERROR)
local e_flags = ProtoExpert.new("trp.flags_exclusive", "More than one of I, A, F",
				expert.group.MALFORMED, expert.severity.ERROR)
trp.experts = { e_reserved, e_short, e_flags }

trp.prefs.ports = Pref.string("UDP ports", "", "Comma-separated UDP ports always decoded as TRP")

local ddp = Dissector.get("iwarp_ddp_rdmap")
local known = {}	-- "addr:port-addr:port" of conversations seen

local function conv_key(pinfo)
	local a = tostring(pinfo.src) .. ":" .. pinfo.src_port
	local b = tostring(pinfo.dst) .. ":" .. pinfo.dst_port
	if a < b then return a .. "-" .. b end
	return b .. "-" .. a
end

local function pref_port(pinfo)
	for p in string.gmatch(trp.prefs.ports, "%d+") do
		local n = tonumber(p)
		if pinfo.src_port == n or pinfo.dst_port == n then return true end
	end
	return false
end

local function mpa_frame(tvb, tree)
	local t = tree:add(trp, tvb(), "MPA " .. (tvb(0, 16):string() == "MPA ID Req Frame"
					     and "request" or "reply") .. " frame")
	t:add(F.mpa_key, tvb(0, 16))
	local fl = t:add(F.mpa_flags, tvb(16, 1))
	fl:add(F.mpa_m, tvb(16, 1))
	fl:add(F.mpa_c, tvb(16, 1))
	fl:add(F.mpa_rj, tvb(16, 1))
	fl:add(F.mpa_e, tvb(16, 1))
	t:add(F.mpa_rev, tvb(17, 1))
	t:add(F.mpa_pdlen, tvb(18, 2))
	local pd = tvb(18, 2):uint()
	local off = 20
	if tvb(17, 1):uint() == 2 and pd >= 4 and tvb:len() >= 24 then
		t:add(F.mpa_ird, tvb(20, 2))
		t:add(F.mpa_ord, tvb(22, 2))
		off = 24
		pd = pd - 4
	end
	if pd > 0 and tvb:len() >= off + pd then
		t:add(F.mpa_pdata, tvb(off, pd))
	end
end

local function sack_blocks(tvb, tree)
	local n = math.floor(tvb:len() / 8)
	for i = 0, n - 1 do
		local b = tree:add(F.sack, tvb(i * 8, 8))
		b:add(F.sack_first, tvb(i * 8, 4))
		b:add(F.sack_last, tvb(i * 8 + 4, 4))
		b:append_text(string.format(" (%u .. %u)", tvb(i * 8, 4):uint(),
					    tvb(i * 8 + 4, 4):uint()))
	end
end

function trp.dissector(tvb, pinfo, tree)
	if tvb:len() < 10 then
		tree:add_proto_expert_info(e_short)
		return 0
	end
	pinfo.cols.protocol = "TRP"
	local t = tree:add(trp, tvb(0, 10), "TRP")
	local psn, ack = tvb(0, 4):uint(), tvb(4, 4):uint()
	local fw = tvb(8, 2):uint()
	local credits = bit.band(fw, 0x0FFF)
	t:add(F.psn, tvb(0, 4))
	t:add(F.ack, tvb(4, 4))
	local fl = t:add(F.flags, tvb(8, 2))
	fl:add(F.f_i, tvb(8, 2))
	fl:add(F.f_a, tvb(8, 2))
	fl:add(F.f_f, tvb(8, 2))
	fl:add(F.f_r, tvb(8, 2))
	t:add(F.credits, tvb(8, 2))
	t:add(F.limit, tvb(4, 4), (ack + credits) % 4294967296)
	local i, a, f = bit.band(fw, 0x8000) ~= 0, bit.band(fw, 0x4000) ~= 0,
			bit.band(fw, 0x2000) ~= 0
	if bit.band(fw, 0x1000) ~= 0 then t:add_proto_expert_info(e_reserved) end
	if (i and 1 or 0) + (a and 1 or 0) + (f and 1 or 0) > 1 then
		t:add_proto_expert_info(e_flags)
	end
	local body = tvb:len() > 10 and tvb(10):tvb() or nil
	local kind = i and "init" or a and "ack" or f and "fin" or "data"
	t:add(F.kind, kind)
	t:append_text(string.format(", %s, PSN %u, ack %u, credits %u", kind,
				    psn, ack, credits))
	pinfo.cols.info = string.format("TRP %s PSN=%u ack=%u credits=%u", kind,
					psn, ack, credits)
	if i and body and body:len() >= 20 then
		mpa_frame(body, tree)
	elseif a and body then
		sack_blocks(body, t)
	elseif not i and not a and not f and body then
		ddp:call(body, pinfo, tree)
	end
	return tvb:len()
end

-- An I packet with an MPA frame after the header starts a conversation.
local function heuristic(tvb, pinfo, tree)
	local key = conv_key(pinfo)
	if not known[key] and not pref_port(pinfo) then
		if tvb:len() < 30 or bit.band(tvb(8, 2):uint(), 0xF000) ~= 0x8000 then
			return false
		end
		local k = tvb(10, 16):string()
		if k ~= "MPA ID Req Frame" and k ~= "MPA ID Rep Frame" then
			return false
		end
		known[key] = true
	end
	trp.dissector(tvb, pinfo, tree)
	return true
end

trp:register_heuristic("udp", heuristic)
