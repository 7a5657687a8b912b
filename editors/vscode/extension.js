// Starts `akmc lsp` (the akm language server) for .akm files. Everything else — diagnostics,
// hover, definitions, completion, the outline, formatting, quick fixes — comes from the server.
"use strict";

const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function serverOptions() {
  const configured = vscode.workspace.getConfiguration("akm").get("server.command", ["akmc", "lsp"]);
  const [command, ...args] = configured.length > 0 ? configured : ["akmc", "lsp"];
  return { command, args, transport: TransportKind.stdio };
}

function start() {
  client = new LanguageClient("akm", "akm language server", serverOptions(), {
    documentSelector: [
      { scheme: "file", language: "akm" },
      { scheme: "untitled", language: "akm" },
    ],
    // A workflow changed on disk (a pull, another editor) can change what the open ones report.
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.akm") },
  });
  return client.start();
}

async function restart() {
  if (client) {
    await client.stop();
  }
  return start();
}

function activate(context) {
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration("akm.server.command")) {
        restart();
      }
    }),
    vscode.commands.registerCommand("akm.restartServer", restart),
  );
  return start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
