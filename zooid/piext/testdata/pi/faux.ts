// Test-only pi extension: a scripted "faux" model provider. Its first response
// calls the tool named by FAUX_TOOL (arguments FAUX_ARGS, JSON); its second
// echoes the tool result's text, so the result is seen to reach the model. It
// also prints the tools the model was offered as "FAUX_TOOLS <json>" on stderr.
import { registerFauxProvider, fauxAssistantMessage, fauxToolCall, fauxText } from "@earendil-works/pi-ai";

// offered replays the transcript's system messages (pi-ai 1.6 declares tools
// there, toolsAdded and toolsRemoved) into the names of the tools on offer.
function offered(context) {
	const names = new Set((context.tools || []).map((t) => t.name));
	for (const m of context.messages || []) {
		if (m.role !== "system") continue;
		for (const t of m.toolsAdded || []) names.add(t.name);
		for (const t of m.toolsRemoved || []) names.delete(t.name);
	}
	return [...names];
}

export default function faux(pi) {
	const reg = registerFauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
	const tool = process.env.FAUX_TOOL || "zooid_get_recent_threads";
	const args = JSON.parse(process.env.FAUX_ARGS || "{}");
	reg.setResponses([
		(context) => {
			process.stderr.write("FAUX_TOOLS " + JSON.stringify(offered(context)) + "\n");
			return fauxAssistantMessage(fauxToolCall(tool, args), { stopReason: "toolUse" });
		},
		(context) => {
			const last = context.messages[context.messages.length - 1];
			const text = ((last && last.content) || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
			return fauxAssistantMessage(fauxText("tool said: " + text));
		},
	]);
	pi.registerProvider("faux", {
		baseUrl: "http://127.0.0.1:9",
		apiKey: "faux",
		api: reg.api,
		models: reg.models.map((m) => ({ id: m.id, name: m.name, reasoning: false, input: ["text"], cost: m.cost, contextWindow: m.contextWindow, maxTokens: m.maxTokens })),
	});
}
