fn main() -> std::process::ExitCode {
    parent_tool_dispatch::main()
}
