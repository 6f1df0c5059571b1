// Test-only pi extension for the features (steps): a scripted "faux" model
// provider that works through a script the harness writes. FAUX_SCRIPT names
// a JSON-lines file; each model call takes its next line. pi-acp starts one pi
// process per session, so the count of lines taken lives beside the script
// (FAUX_SCRIPT + ".pos"), not in memory. A line is {"call": tool, "args": {…}}
// (the model calls that tool) or {"say": text} (the model replies and ends
// its turn; "{result}" in text becomes the text of the last tool result it
// got and "{prompt}" the text of its last prompt, so a feature sees that
// what the daemon sent reached the model). With no line
// left, the model says so, which no feature expects. Each reply's text is
// appended to FAUX_SCRIPT + ".said" (a JSON string a line): the harness's
// barrier waits until the agent has posted each of them.
import { readFileSync, writeFileSync, appendFileSync, existsSync } from "node:fs";
import { registerFauxProvider, fauxAssistantMessage, fauxToolCall, fauxText } from "@mariozechner/pi-ai";

function nextLine(script: string): any {
	const lines = (existsSync(script) ? readFileSync(script, "utf8") : "").split("\n").filter((l) => l.trim() !== "");
	const posFile = script + ".pos";
	const pos = existsSync(posFile) ? Number(readFileSync(posFile, "utf8")) || 0 : 0;
	if (pos >= lines.length) return null;
	writeFileSync(posFile, String(pos + 1));
	return JSON.parse(lines[pos]);
}

function lastToolResult(context: any): string {
	for (let i = context.messages.length - 1; i >= 0; i--) {
		const m = context.messages[i];
		if (m && m.role === "toolResult") {
			return (m.content || []).filter((c: any) => c.type === "text").map((c: any) => c.text).join("\n");
		}
	}
	return "";
}

function lastPrompt(context: any): string {
	for (let i = context.messages.length - 1; i >= 0; i--) {
		const m = context.messages[i];
		if (m && m.role === "user") {
			if (typeof m.content === "string") return m.content;
			return (m.content || []).filter((c: any) => c.type === "text").map((c: any) => c.text).join("\n");
		}
	}
	return "";
}

export default function scripted(pi: any) {
	const script = process.env.FAUX_SCRIPT;
	if (!script) throw new Error("scripted.ts: FAUX_SCRIPT is not set");
	const reg = registerFauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
	const step = (context: any) => {
		const line = nextLine(script);
		process.stderr.write("FAUX_STEP " + JSON.stringify(line) + "\n");
		if (line && typeof line.call === "string") {
			return fauxAssistantMessage(fauxToolCall(line.call, line.args || {}), { stopReason: "toolUse" });
		}
		const text = line && typeof line.say === "string"
			? line.say.split("{result}").join(lastToolResult(context)).split("{prompt}").join(lastPrompt(context))
			: "faux: the script " + script + " has no step left";
		appendFileSync(script + ".said", JSON.stringify(text) + "\n");
		return fauxAssistantMessage(fauxText(text));
	};
	reg.setResponses(Array.from({ length: 1000 }, () => step));
	pi.registerProvider("faux", {
		baseUrl: "http://127.0.0.1:9",
		apiKey: "faux",
		api: reg.api,
		models: reg.models.map((m: any) => ({ id: m.id, name: m.name, reasoning: false, input: ["text"], cost: m.cost, contextWindow: m.contextWindow, maxTokens: m.maxTokens })),
	});
}
