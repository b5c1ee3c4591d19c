mod workspace;
