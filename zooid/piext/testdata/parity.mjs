// Loads the generated extension (argv[2], a copy named .mjs) with a recording
// stand-in for pi's ExtensionAPI, runs its before_agent_start gating for the
// session id argv[3], and prints what pi would see: every registered tool and
// the active ones. With argv[4] "then-unreachable" it runs the gating once
// more with the daemon's socket gone and prints the active tools then too
// (activeAfter).
const ext = await import(process.argv[2]);
const registered = [];
const handlers = {};
let active = ["read", "bash"];
const pi = {
	registerTool: (t) => { registered.push(t); active.push(t.name); },
	on: (ev, h) => { handlers[ev] = h; },
	getActiveTools: () => active.slice(),
	setActiveTools: (names) => { active = names.slice(); },
};
ext.default(pi);
const ctx = { sessionManager: { getSessionId: () => process.argv[3] } };
await handlers["before_agent_start"]({ type: "before_agent_start", prompt: "" }, ctx);
const first = active.slice();
let activeAfter;
if (process.argv[4] === "then-unreachable") {
	process.env.ZOOID_SOCKET = "/nonexistent/zooid.sock";
	await handlers["before_agent_start"]({ type: "before_agent_start", prompt: "" }, ctx);
	activeAfter = active.slice();
}
process.stdout.write(JSON.stringify({
	registered: registered.map((t) => ({ name: t.name, label: t.label, description: t.description, parameters: t.parameters })),
	active: first,
	activeAfter,
}));
