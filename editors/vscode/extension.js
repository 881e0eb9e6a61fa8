// extension.js -- the VS Code side of `fabricscript lsp`: starts the server
// on stdio for .fab files (and .py files when fabricscript.checkPython is
// set). Everything else (diagnostics, code actions, hover, completion,
// definition) is the server's; see docs/editors.md. Needs `npm install` in
// this folder for vscode-languageclient.
const vscode = require("vscode");
const {LanguageClient} = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("fabricscript");
  const command = config.get("path", "fabricscript");
  const selector = [{scheme: "file", language: "fabricscript"}];
  if (config.get("checkPython", false)) selector.push({scheme: "file", language: "python"});
  client = new LanguageClient("fabricscript", "FabricScript", {command, args: ["lsp"]},
                              {documentSelector: selector});
  client.start();
  context.subscriptions.push({dispose: () => client && client.stop()});
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = {activate, deactivate};
